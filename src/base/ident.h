/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who this process is, for log lines and reports, where many processes of a job write side by
 * side: the host name, the thread id, and the job rank the launcher gave (torchrun's RANK, Open
 * MPI's OMPI_COMM_WORLD_RANK, Slurm's SLURM_PROCID, PMI's PMI_RANK: the first one set).
 */
#ifndef RECAP_BASE_IDENT_H
#define RECAP_BASE_IDENT_H

#include <stddef.h>

const char *recap__ident_host(void);
long recap__ident_tid(void);
/* -1 when no launcher variable holds a rank. */
int recap__ident_rank(void);
/* The time now, UTC, ISO 8601 to the microsecond ("2025-01-31T12:00:00.123456Z"); buf holds at
 * least 32 bytes. Returns buf ("" when the clock cannot be read). */
const char *recap__ident_time(char *buf, size_t len);

#endif

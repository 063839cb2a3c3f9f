/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tools' manuals, written once and printed two ways: as text for --help and as roff for
 * man(1) (--man, which make turns into the installed NAME.1), so the two cannot drift. Also the
 * word wrapping the tools' tables share, and their text of names and values from outside (program
 * arguments, settings, what a driver or python3 said), escaped as recap's log lines are
 * (src/base/text.h) so each stays on its line.
 */
#ifndef RECAP_TOOLS_MANUAL_H
#define RECAP_TOOLS_MANUAL_H

#include <stdio.h>

typedef enum { MAN_TEXT, MAN_ROFF } man_format_t;

typedef struct man {
    FILE *out;
    man_format_t format;
    int width; /* MAN_TEXT: the wrap column */
    int last;  /* what was printed last (spacing between blocks) */
} man_t;

/* The terminal's width for stdout: $COLUMNS when set to a number, else the tty's width; 0 when
 * stdout is not a terminal (and COLUMNS is not set): callers do not wrap then. */
int tool_term_width(void);

/* Prints `text` (escaped: tool_text) from column `col`, wrapping at spaces before `width` (no
 * wrapping when width is 0) with continuation lines indented to `indent`; ends the line. */
void tool_wrap(FILE *out, const char *text, int col, int indent, int width);

/* Prints `s` escaped (src/base/text.h): control characters and bytes that are not UTF-8 never
 * reach a report line raw. */
void tool_text(FILE *out, const char *s);
/* `s` escaped, in memory the caller frees; NULL when there is none. */
char *tool_text_dup(const char *s);

/* Starts a manual page: "NAME(SECTION)" and the NAME section ("name - summary"). */
void man_begin(man_t *m, FILE *out, man_format_t format, const char *name, const char *section,
               const char *version, const char *summary);
void man_section(man_t *m, const char *title);
/* A paragraph: text wrapped (MAN_TEXT) or filled by man (MAN_ROFF). */
void man_para(man_t *m, const char *text);
/* Lines printed as they are (synopsis, examples), one per '\n'-separated line. */
void man_lines(man_t *m, const char *text);
/* A tagged paragraph: an option or a name, then what it means. */
void man_item(man_t *m, const char *tag, const char *text);

#endif

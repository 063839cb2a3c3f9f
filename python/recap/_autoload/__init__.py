# SPDX-License-Identifier: Apache-2.0
"""What ``recap-run`` loads into every Python process of the job (through the sitecustomize.py
beside this file): recap's Megatron module in place of Megatron-Core's, and automatic graph
registration, without editing the script."""

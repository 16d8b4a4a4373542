"""Cron expressions built to hurt a parser: each must be refused, and fast (the
cron_checks bench scenario times them)."""

HOSTILE = [
    "1," * 50_000,
    "*/0 * * * *",
    "0 0 */31 * MON#5",  # day 1 is never a fifth Monday: the costliest "never fires"
    "0 0 */30 2 1#5",
    "0 0 */31 2 5L",
    "0 0 31 4,6,9,11 *",
    "\x00 * * * *",
    "$(rm -rf /) * * * *",
    "0 0 1 1 1#6",
    "9999999999999999999999 * * * *",
    "* * * * * * * * * * * * * * * * * * * *",
    "0-59/1," * 15 + "0 * * * *",
]

#!/usr/bin/env python
"""Django's command-line utility for jobsite."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobsite.settings")
    from jobsite.errors import run_with_clear_errors

    run_with_clear_errors(sys.argv)


if __name__ == "__main__":
    main()

"""``python -m devenus.train <verl overrides> devenus.method=<name>``: see :mod:`devenus.adapters.verl.train`."""

import sys

from devenus.adapters.verl.train import main

if __name__ == "__main__":
    sys.exit(main())

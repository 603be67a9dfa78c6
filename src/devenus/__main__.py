import sys

from devenus.cli import main

sys.exit(main())

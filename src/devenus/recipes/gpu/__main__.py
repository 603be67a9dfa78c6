import sys

from devenus.recipes.gpu.launch import main

sys.exit(main())

import sys

from subregweigh.cli import main

sys.exit(main())

import sys

from lapis.cli import main

sys.exit(main())

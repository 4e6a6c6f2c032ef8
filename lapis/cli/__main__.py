import sys

from lapis.cli.main import main

sys.exit(main())

import sys

from skewgroup.cli import main

sys.exit(main())

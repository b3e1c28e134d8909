import sys

from skewgroup.app.cli import main

sys.exit(main())

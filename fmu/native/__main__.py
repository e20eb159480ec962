"""``python -m fmu.native prebuild [FOLDER]`` (see :func:`fmu.native.main`)."""
import sys

from . import main

sys.exit(main())

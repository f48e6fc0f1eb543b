import sys

from benchmarks.compare.run import main

sys.exit(main())

import sys

from elastic_sps.services.cli import main

sys.exit(main())

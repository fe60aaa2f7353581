import sys

from app.demo.cli import main

sys.exit(main())

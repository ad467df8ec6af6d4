import sys

from grpo_fast.cli import main

sys.exit(main())

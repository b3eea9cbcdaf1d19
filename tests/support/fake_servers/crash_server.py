"""A fake skill server that dies at start, as a misconfigured skill does."""

import sys

sys.stderr.write("starting\ncannot read config: boom\n")
sys.exit(3)

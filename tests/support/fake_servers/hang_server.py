"""A fake skill server that starts but never answers; writes its pid to the file named in argv[1]."""

import os
import sys
import time
from pathlib import Path

Path(sys.argv[1]).write_text(str(os.getpid()))
time.sleep(600)

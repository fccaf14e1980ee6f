"""`python -m eval_pipelines.toolservers --fd N --servers email,chat --parent-pid P`: the body of a
`ToolServerProcess` child (see `host.py`)."""

import sys

from eval_pipelines.toolservers.host import main

sys.exit(main())

"""Print what a replica was given: ``env {...}`` (the whole environment, as JSON), its own IP as
``ip A.B.C.D`` and its command line as ``argv [...]``; then sleep the seconds given, if any."""

import json
import os
import socket
import sys
import time

print("env " + json.dumps(dict(os.environ), sort_keys=True), flush=True)
print("ip " + socket.gethostbyname(socket.gethostname()), flush=True)
print("argv " + json.dumps(sys.argv), flush=True)
if len(sys.argv) > 1:
    time.sleep(float(sys.argv[1]))

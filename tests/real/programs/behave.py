"""A replica whose end is chosen by its arguments, for the real-failure tests.

behave.py exit CODE            print, then exit with CODE
behave.py oom                  allocate memory until the kernel's OOM killer ends the process
behave.py sigterm SECONDS      wait for SIGTERM; on it print how long it waited and exit 0
behave.py message TEXT         write TEXT to /dev/termination-log and exit 0
"""

import os
import signal
import sys
import time

what = sys.argv[1]
print(f"behave {' '.join(sys.argv[1:])} pid={os.getpid()} restart={os.environ.get('T9K_RESTART', '?')}", flush=True)
if what == "exit":
    sys.exit(int(sys.argv[2]))
elif what == "oom":
    hog = []
    while True:
        hog.append(bytearray(16 << 20))  # touched pages: the cgroup's limit is reached for real
        for i in range(0, len(hog[-1]), 4096):
            hog[-1][i] = 1
elif what == "sigterm":
    started = time.monotonic()

    def on_term(signum: int, frame: object) -> None:
        print(f"got SIGTERM after {time.monotonic() - started:.1f}s; saving and exiting", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    print("ready", flush=True)
    time.sleep(float(sys.argv[2]))
    print("never signalled", flush=True)
elif what == "message":
    with open("/dev/termination-log", "w") as f:
        f.write(sys.argv[2])
else:
    sys.exit(f"unknown behaviour {what!r}")

# HTTP requests for the end-to-end test, run inside the sandbox (loopback only, bounded):
#
#   client.py get PATH          prints the body of GET http://127.0.0.1:8080PATH; exit 0 on 200,
#                             7 when refused (like curl), 1 otherwise
#   client.py burst N PATH      N requests one after another; prints "answered refused failed"
#   client.py loop DIR PATH     requests one after another until 5 were answered after DIR/restarted
#                             appeared (at most 60 s); creates DIR/answering at the first answer;
#                             prints "answered refused failed"
import http.client, os, sys, time

def get(path):
    """(status, body) or raises ConnectionRefusedError / OSError."""
    connection = http.client.HTTPConnection("127.0.0.1", 8080, timeout=15)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()

def one(path):
    """The outcome of one request; a failure's reason goes to stderr."""
    try:
        status, _ = get(path)
        if status == 200:
            return "answered"
        print(f"HTTP status {status}", file=sys.stderr)
        return "failed"
    except ConnectionRefusedError:
        print("connection refused", file=sys.stderr)
        return "refused"
    except (OSError, http.client.HTTPException) as error:
        print(f"failed: {error!r}", file=sys.stderr)
        return "failed"

command = sys.argv[1]
if command == "get":
    try:
        status, body = get(sys.argv[2])
    except ConnectionRefusedError:
        print("connection refused", file=sys.stderr)
        sys.exit(7)
    sys.stdout.write(body)
    sys.exit(0 if status == 200 else 1)
counts = {"answered": 0, "refused": 0, "failed": 0}
if command == "burst":
    for _ in range(int(sys.argv[2])):
        counts[one(sys.argv[3])] += 1
elif command == "loop":
    directory, path = sys.argv[2], sys.argv[3]
    after_restart = 0
    deadline = time.monotonic() + 60
    while after_restart < 5 and time.monotonic() < deadline:
        restarted = os.path.exists(directory + "/restarted")
        outcome = one(path)
        counts[outcome] += 1
        if outcome == "answered":
            after_restart += restarted
            if counts["answered"] == 1:
                open(directory + "/answering", "w").close()
print(counts["answered"], counts["refused"], counts["failed"])

# kv requests for the end-to-end test, run inside the sandbox (the Unix socket /run/kv.sock, or
# 127.0.0.1:$KV_TCP_PORT when that is set; bounded waits):
#
#   client.py send LINE...      sends each LINE on one connection; prints each answer line;
#                             exit 0, 7 when refused (like curl), 1 otherwise
#   client.py burst N           N "GET burst" requests, each on a connection of its own; prints
#                             "answered refused failed"
#   client.py loop DIR          requests one after another until 5 were answered after DIR/restarted
#                             appeared (at most 60 s); creates DIR/answering at the first answer;
#                             prints "answered refused failed"
#   client.py slow DIR KEY VALUE  sends "SET KEY " and creates DIR/half-sent, waits for DIR/go,
#                             then sends "VALUE\n" and prints the answer (the in-flight request
#                             of the drain test)
#   client.py hold DIR          opens a connection, creates DIR/held, and keeps it open until
#                             DIR/release appears (at most 60 s)
#   client.py idle              opens a connection, sends nothing, prints the line kv sends and
#                             "closed after S s" (tenths) once kv closes it (at most 15 s)
import os, socket, sys, time

PATH = "/run/kv.sock"

def connect():
    port = os.environ.get("KV_TCP_PORT")
    if port:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(15)
        s.connect(("127.0.0.1", int(port)))
        return s
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(15)
    s.connect(PATH)
    return s

def answer(s):
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            raise OSError("connection closed before an answer line")
        data += chunk
    return data[:-1].decode("utf-8", "replace")

def one():
    try:
        s = connect()
        try:
            s.sendall(b"GET burst\n")
            reply = answer(s)
        finally:
            s.close()
        if reply.startswith("VALUE") or reply == "NOTFOUND":
            return "answered"
        print(f"answer {reply!r}", file=sys.stderr)
        return "failed"
    except (ConnectionRefusedError, FileNotFoundError):
        print("connection refused", file=sys.stderr)
        return "refused"
    except OSError as error:
        print(f"failed: {error!r}", file=sys.stderr)
        return "failed"

def wait_for(path, seconds=60):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.02)

command = sys.argv[1]
if command == "send":
    try:
        s = connect()
    except (ConnectionRefusedError, FileNotFoundError):
        print("connection refused", file=sys.stderr)
        sys.exit(7)
    for line in sys.argv[2:]:
        try:
            s.sendall(line.encode() + b"\n")
        except BrokenPipeError:
            pass  # refused (ERR busy) before the request was read: the answer is still there
        print(answer(s))
    s.close()
    sys.exit(0)
if command == "slow":
    directory, key, value = sys.argv[2:5]
    s = connect()
    s.sendall(f"SET {key} ".encode())
    open(directory + "/half-sent", "w").close()
    wait_for(directory + "/go")
    s.settimeout(30)
    s.sendall(value.encode() + b"\n")
    print(answer(s))
    sys.exit(0)
if command == "hold":
    directory = sys.argv[2]
    s = connect()
    open(directory + "/held", "w").close()
    wait_for(directory + "/release")
    s.close()
    sys.exit(0)
if command == "idle":
    s = connect()
    started = time.monotonic()
    print(answer(s))
    while s.recv(65536):
        pass
    print(f"closed after {time.monotonic() - started:.1f} s")
    sys.exit(0)
counts = {"answered": 0, "refused": 0, "failed": 0}
if command == "burst":
    for _ in range(int(sys.argv[2])):
        counts[one()] += 1
elif command == "loop":
    directory = sys.argv[2]
    after_restart = 0
    deadline = time.monotonic() + 60
    while after_restart < 5 and time.monotonic() < deadline:
        restarted = os.path.exists(directory + "/restarted")
        outcome = one()
        counts[outcome] += 1
        if outcome == "answered":
            after_restart += restarted
            if counts["answered"] == 1:
                open(directory + "/answering", "w").close()
print(counts["answered"], counts["refused"], counts["failed"])

# The client side of SessionPeer.CrossChecksWithPythonH2 (session_peer_test.cc): Debian's
# python3-h2 speaks HTTP/2 to our Session over fd 0 (a socketpair). It sends a GET, a POST whose
# body is larger than the stream window (our consume() must open it), a GET whose response is
# larger than its own window (it sends WINDOW_UPDATEs), and a stream it resets; then it checks
# the answers, says GOAWAY and exits 0 ("ok" on stderr), or 1 with the reason.
import os
import sys

import h2.config
import h2.connection
import h2.events

conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                            header_encoding="utf-8"))
conn.initiate_connection()


def flush():
    data = conn.data_to_send()
    while data:
        n = os.write(1, data)
        data = data[n:]


def head(method, path):
    return [(":method", method), (":scheme", "http"), (":path", path), (":authority", "peer")]


post_body = b"p" * 200000
bodies = {}
statuses = {}
ended = set()
reset_seen = set()

flush()
conn.send_headers(1, head("GET", "/small"), end_stream=True)
conn.send_headers(3, head("POST", "/echo") + [("content-length", str(len(post_body)))])
conn.send_headers(5, head("GET", "/big"), end_stream=True)
conn.send_headers(7, head("GET", "/small"), end_stream=True)
conn.reset_stream(7)
flush()
post_sent = 0

while len(ended) < 3:
    # The POST body goes as the windows allow.
    while post_sent < len(post_body):
        window = conn.local_flow_control_window(3)
        if window <= 0:
            break
        n = min(window, conn.max_outbound_frame_size, len(post_body) - post_sent)
        conn.send_data(3, post_body[post_sent:post_sent + n],
                       end_stream=post_sent + n == len(post_body))
        post_sent += n
    flush()
    data = os.read(0, 65536)
    if not data:
        sys.exit("the server closed the connection early")
    for event in conn.receive_data(data):
        if isinstance(event, h2.events.ResponseReceived):
            statuses[event.stream_id] = dict(event.headers)[":status"]
        elif isinstance(event, h2.events.DataReceived):
            bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            ended.add(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            reset_seen.add(event.stream_id)
        elif isinstance(event, h2.events.ConnectionTerminated):
            sys.exit("GOAWAY from the server: %r" % event)
    flush()

expected = {1: b"hello /small", 3: b"got 200000", 5: b"x" * 300000}
for stream, body in expected.items():
    if statuses.get(stream) != "200" or bodies.get(stream) != body:
        sys.exit("stream %d: status %r, %d bytes" % (stream, statuses.get(stream),
                                                      len(bodies.get(stream, b""))))
conn.close_connection()
flush()
print("ok", file=sys.stderr)

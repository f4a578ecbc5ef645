"""A signing proxy for API fuzzing: forwards each request to a Seed service and passes the answer
back. A request whose `Signature` header is exactly MARKER (the fuzzer sends it as the document's
`signature` apiKey credential) goes out signed with an account key (RFC 9421 over @method
@authority @path @query content-digest, with created, nonce and keyid), the marker replaced by the
real signature. Any other request goes out as it came (unsigned, or with whatever made-up
Signature/Authorization the fuzzer put on it), so the server has to refuse it: that is what the
fuzzer's ignored_auth check probes. Usage: signing_proxy.py KEY_FILE UPSTREAM_URL PORT_FILE MARKER
"""

import base64
import hashlib
import http.client
import http.server
import json
import os
import sys
import time
import urllib.parse

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

COMPONENTS = ("@method", "@authority", "@path", "@query", "content-digest")


def sf_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Signer:
    def __init__(self, key_file, upstream):
        with open(key_file) as handle:
            key = json.load(handle)
        self.keyid = key["account_id"]
        self.key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(key["secret_key"]))
        self.upstream = urllib.parse.urlsplit(upstream)

    def headers(self, method, target, body):
        path, _, query = target.partition("?")
        digest = "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":"
        nonce = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        params = "(" + " ".join(sf_string(c) for c in COMPONENTS) + ")"
        params += ";created=%d;nonce=%s;keyid=%s" % (int(time.time()), sf_string(nonce), sf_string(self.keyid))
        values = {
            "@method": method.upper(),
            "@authority": self.upstream.netloc.lower(),
            "@path": path or "/",
            "@query": "?" + query,
            "content-digest": digest,
        }
        base = "".join("%s: %s\n" % (sf_string(c), values[c]) for c in COMPONENTS)
        base += '"@signature-params": ' + params
        signature = base64.b64encode(self.key.sign(base.encode())).decode()
        return {
            "Content-Digest": digest,
            "Signature-Input": "seed=" + params,
            "Signature": "seed=:" + signature + ":",
        }


def handler(signer, marker):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            sign = self.headers.get_all("Signature") == [marker]
            dropped = ("host", "content-length", "connection")
            if sign:
                dropped += ("signature", "signature-input", "content-digest")
            headers = {name: value for name, value in self.headers.items() if name.lower() not in dropped}
            if sign:
                headers.update(signer.headers(self.command, self.path, body))
            connection = http.client.HTTPConnection(signer.upstream.hostname, signer.upstream.port, timeout=60)
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("content-length", "connection", "transfer-encoding", "date"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            connection.close()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_TRACE = do_QUERY = forward

    return Handler


def main():
    key_file, upstream, port_file, marker = sys.argv[1:5]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(Signer(key_file, upstream), marker))
    with open(port_file, "w") as handle:
        handle.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()

"""``cairn tls init DIR``: a job's own CA and certificates, and the keys that use them.

Invariant: the command only calls ``make_job_certificates`` and prints; it never overwrites
a file (a non-empty DIR is refused) and never prints a private key.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_tls_command(sub: Any) -> None:
    """Register ``cairn tls init`` on the ``cairn`` parser's subcommands."""
    tls = sub.add_parser("tls", help="TLS certificates for a job (security.ssl.*)")
    actions = tls.add_subparsers(dest="tls_command", required=True)
    init = actions.add_parser(
        "init",
        help="make a job's own CAs and certificates (internal wire, control endpoint) in DIR",
    )
    init.add_argument("directory", metavar="DIR", help="a new or empty directory")
    init.add_argument(
        "--host",
        action="append",
        default=[],
        help="a name or address clients use to reach the control endpoint (repeatable); "
        "localhost and 127.0.0.1 are always in its certificate",
    )
    init.add_argument("--days", type=int, default=365, help="validity (default: 365)")
    init.set_defaults(func=cmd_tls_init)


def cmd_tls_init(args: argparse.Namespace) -> int:
    from cairn.runtime.network.certificates import make_job_certificates

    try:
        certs = make_job_certificates(args.directory, hosts=tuple(args.host), days=args.days)
    except (FileExistsError, ValueError) as error:
        print(f"cairn tls init: {error}", file=sys.stderr)
        return 1
    print(f"wrote {certs.directory}/ (private keys 0600; no CA key is kept):")
    print(f"  {certs.internal_ca.name:16} internal truststore")
    print(f"  {certs.internal.name:16} internal keystore: certificate and key of every process")
    print(f"  {certs.rest_ca.name:16} control endpoint truststore (give it to clients)")
    print(f"  {certs.rest.name:16} control endpoint keystore")
    print(f"  {certs.rest_client.name:16} client certificate (CAIRN_REST_CLIENT_CERT)")
    print("configuration (workers read the same paths on their hosts):")
    for key, value in certs.options().items():
        print(f"  -D {key}={value}")
    return 0

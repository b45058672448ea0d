"""Security options (PLAIN, CURVE, ZAP) as libzmq keeps them, and the mechanism a connection uses.

libzmq keeps one role flag (``as_server``) and one ``mechanism`` per socket; each security option
moves them the same way here:
* PLAIN_SERVER 0/1 -> mechanism PLAIN (1) or NULL (0), role server/0;
  PLAIN_USERNAME/PASSWORD (1-255 bytes) -> PLAIN client; ``None`` returns to NULL.
* CURVE_SERVER 0/1 -> mechanism CURVE (1) or NULL (0), role server/0;
  CURVE_PUBLICKEY/SECRETKEY -> CURVE, role unchanged; CURVE_SERVERKEY -> CURVE client.
Keys are stored raw (32 bytes) and read back as 40 Z85 bytes (libzmq's string form; an unset key
reads as the Z85 of 32 zero bytes, as in libzmq). Options are snapshot per session, so everything
here runs on a private copy in the IO thread once a connection starts.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from mqcore.constants import Errno, SecurityMechanism, SocketOption
from mqcore.error import ZMQError
from mqcore.zmtp import CurveMechanism, Mechanism, NullMechanism, PlainMechanism, z85_decode, z85_encode

if TYPE_CHECKING:
    from mqcore.options import Options

Opt = SocketOption

#: options handled here rather than by the generic table in ``options.py``
SECURITY_OPTIONS = frozenset({
    Opt.PLAIN_SERVER, Opt.PLAIN_USERNAME, Opt.PLAIN_PASSWORD, Opt.CURVE_SERVER, Opt.CURVE_PUBLICKEY,
    Opt.CURVE_SECRETKEY, Opt.CURVE_SERVERKEY, Opt.ZAP_DOMAIN, Opt.ZAP_ENFORCE_DOMAIN,
})

_KEY_ATTR: dict[int, str] = {
    Opt.CURVE_PUBLICKEY: "curve_public_key",
    Opt.CURVE_SECRETKEY: "curve_secret_key",
    Opt.CURVE_SERVERKEY: "curve_server_key",
}
_ZERO_KEY_Z85 = z85_encode(bytes(32))


def _flag(value: Any) -> int:
    try:
        flag = int(value)
    except (TypeError, ValueError):
        raise ZMQError(Errno.EINVAL) from None
    if flag not in (0, 1):
        raise ZMQError(Errno.EINVAL)
    return flag


def _as_bytes(option: int, value: Any) -> bytes:
    if isinstance(value, str):
        raise TypeError(f"option {Opt(option).name} takes bytes, not str (use setsockopt_string)")
    try:
        return bytes(value)
    except TypeError:
        raise ZMQError(Errno.EINVAL) from None


def _curve_key(option: int, value: Any) -> bytes:
    """32 raw bytes, or 40 Z85 characters (41 with libzmq's trailing NUL) -> 32 raw bytes."""
    raw = _as_bytes(option, value)
    if len(raw) == 41 and raw.endswith(b"\0"):
        raw = raw[:40]
    if len(raw) == 32:
        return raw
    if len(raw) == 40:
        try:
            return z85_decode(raw)
        except ValueError:
            raise ZMQError(Errno.EINVAL) from None
    raise ZMQError(Errno.EINVAL)


def set_security_option(opts: Options, option: int, value: Any) -> None:
    """Set one of ``SECURITY_OPTIONS`` on ``opts``; ZMQError(EINVAL) for a bad value, TypeError for str."""
    if option in (Opt.PLAIN_SERVER, Opt.CURVE_SERVER):
        flag = _flag(value)
        opts.as_server = flag
        kind = SecurityMechanism.PLAIN if option == Opt.PLAIN_SERVER else SecurityMechanism.CURVE
        opts.mechanism = int(kind) if flag else int(SecurityMechanism.NULL)
    elif option in (Opt.PLAIN_USERNAME, Opt.PLAIN_PASSWORD):
        attr = "plain_username" if option == Opt.PLAIN_USERNAME else "plain_password"
        if value is None:
            setattr(opts, attr, b"")
            opts.mechanism = int(SecurityMechanism.NULL)
            return
        raw = _as_bytes(option, value)
        if not 0 < len(raw) < 256:
            raise ZMQError(Errno.EINVAL)
        setattr(opts, attr, raw)
        opts.as_server = 0
        opts.mechanism = int(SecurityMechanism.PLAIN)
    elif option in _KEY_ATTR:
        setattr(opts, _KEY_ATTR[option], _curve_key(option, value))
        opts.mechanism = int(SecurityMechanism.CURVE)
        if option == Opt.CURVE_SERVERKEY:
            opts.as_server = 0
    elif option == Opt.ZAP_DOMAIN:
        raw = _as_bytes(option, value)
        if len(raw) > 255:
            raise ZMQError(Errno.EINVAL)
        opts.zap_domain = raw
    elif option == Opt.ZAP_ENFORCE_DOMAIN:
        opts.zap_enforce_domain = _flag(value)
    else:
        raise ZMQError(Errno.EINVAL)


def get_security_option(opts: Options, option: int) -> Any:
    """Read one of ``SECURITY_OPTIONS`` as libzmq reports it."""
    if option == Opt.PLAIN_SERVER:
        return int(bool(opts.as_server) and opts.mechanism == SecurityMechanism.PLAIN)
    if option == Opt.CURVE_SERVER:
        return int(bool(opts.as_server) and opts.mechanism == SecurityMechanism.CURVE)
    if option == Opt.PLAIN_USERNAME:
        return opts.plain_username
    if option == Opt.PLAIN_PASSWORD:
        return opts.plain_password
    if option in _KEY_ATTR:
        key: bytes = getattr(opts, _KEY_ATTR[option])
        return z85_encode(key) if key else _ZERO_KEY_Z85
    if option == Opt.ZAP_DOMAIN:
        return opts.zap_domain
    if option == Opt.ZAP_ENFORCE_DOMAIN:
        return opts.zap_enforce_domain
    raise ZMQError(Errno.EINVAL)


def build_mechanism(opts: Options) -> Mechanism:
    """The mechanism one new connection uses, from the socket's options.

    ValueError (with a sentence saying which key) when CURVE keys are missing or do not match."""
    if opts.mechanism == SecurityMechanism.PLAIN:
        if opts.as_server:
            return PlainMechanism(True)
        return PlainMechanism(False, opts.plain_username, opts.plain_password)
    if opts.mechanism == SecurityMechanism.CURVE:
        if not opts.curve_secret_key:
            raise ValueError("CURVE needs CURVE_SECRETKEY on this socket")
        if opts.as_server:
            return CurveMechanism(True, opts.curve_public_key, opts.curve_secret_key)
        if not opts.curve_server_key:
            raise ValueError("a CURVE client needs CURVE_SERVERKEY (the server's public key)")
        return CurveMechanism(False, opts.curve_public_key, opts.curve_secret_key, opts.curve_server_key)
    return NullMechanism()


def zap_status(reason: bytes | str) -> int:
    """300, 400 or 500 if an ERROR reason is a ZAP status code (how a server refuses a client after
    asking ZAP; libzmq then reports HANDSHAKE_FAILED_AUTH with it), else 0."""
    text = reason.encode("ascii", "replace") if isinstance(reason, str) else bytes(reason)
    if len(text) == 3 and text[1:] == b"00" and text[:1] in (b"3", b"4", b"5"):
        return int(text)
    return 0


def peer_address(sock: socket.socket) -> str:
    """The peer's IP address as text for ZAP (``""`` for ipc or if the peer is already gone)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return ""
    try:
        return str(sock.getpeername()[0])
    except OSError:
        return ""

"""ZAP authentication with pyzmq's names (``zmq.auth``): an Authenticator policy, the
``ThreadAuthenticator`` that serves it (``mqcore.auth.thread``) and CURVE certificate files."""

from mqcore.auth.base import CURVE_ALLOW_ANY, Authenticator
from mqcore.auth.certs import create_certificates, load_certificate, load_certificates

__all__ = ["Authenticator", "CURVE_ALLOW_ANY", "create_certificates", "load_certificate", "load_certificates"]

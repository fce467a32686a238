/*
 * reason.h: why a connection was denied or how a tunnel ended, as one enum
 * with one name table.  The names are the audit vocabulary (ksb-audit(5):
 * the reason and close_reason columns), the X-Ksb-Deny header and the
 * close reason the proxy sends its parent (msg.h): code compares the
 * enum; only reason_name() turns it into text, at those three boundaries.
 */
#ifndef KSB_COMMON_REASON_H
#define KSB_COMMON_REASON_H

/* X(enum suffix, name): the one table.  Order is not part of any format. */
#define REASON_TABLE(X)                                                        \
	/* decision (reason column): allowed */                                \
	X(ALLOWED, "allowed")                                                  \
	/* the CONNECT request (gateway/parse/connect_parse.c) */              \
	X(BAD_REQUEST, "bad_request")                                          \
	X(METHOD_NOT_ALLOWED, "method_not_allowed")                            \
	X(VERSION_NOT_SUPPORTED, "version_not_supported")                      \
	X(HEADER_TOO_LARGE, "header_too_large")                                \
	X(HEADER_TIMEOUT, "header_timeout")                                    \
	X(UNKNOWN_SOURCE, "unknown_source")                                    \
	/* the policy decision (policy/decide.c) */                            \
	X(BAD_HOST, "bad_host")                                                \
	X(IP_LITERAL, "ip_literal")                                            \
	X(NOT_IN_ALLOWLIST, "not_in_allowlist")                                \
	/* the ClientHello (gateway/parse/tls_peek.c) */                       \
	X(NOT_TLS, "not_tls")                                                  \
	X(BAD_HELLO, "bad_hello")                                              \
	X(HELLO_TOO_LARGE, "hello_too_large")                                  \
	X(HELLO_TIMEOUT, "hello_timeout")                                      \
	X(SNI_MISSING, "sni_missing")                                          \
	X(SNI_INVALID, "sni_invalid")                                          \
	X(SNI_MISMATCH, "sni_mismatch")                                        \
	X(GUEST_CLOSED, "guest_closed")                                        \
	/* upstream: resolution, screening, connect */                         \
	X(RESOLVE_FAILED, "resolve_failed")                                    \
	X(ADDRESS_SCREENED, "address_screened")                                \
	X(CONNECT_FAILED, "connect_failed")                                    \
	X(CONNECT_REFUSED, "connect_refused")                                  \
	X(CONNECT_RESET, "connect_reset")                                      \
	X(CONNECT_UNREACHABLE, "connect_unreachable")                          \
	X(CONNECT_TIMEOUT, "connect_timeout")                                  \
	/* caps at accept (429) and the audit (503) */                         \
	X(RATE_LIMITED, "rate_limited")                                        \
	X(INSTANCE_RATE_LIMITED, "instance_rate_limited")                      \
	X(INSTANCE_CONNECTION_LIMIT, "instance_connection_limit")              \
	X(TOO_MANY_CONNECTIONS, "too_many_connections")                        \
	X(AUDIT_UNAVAILABLE, "audit_unavailable")                              \
	/* both: a reload's new policy refuses a live tunnel */                \
	X(REVOKED, "revoked")                                                  \
	/* how a tunnel ended (close_reason column) */                         \
	X(CLOSED, "closed")                                                    \
	X(IDLE_TIMEOUT, "idle_timeout")                                        \
	X(GUEST_ERROR, "guest_error")                                          \
	X(GUEST_RESET, "guest_reset")                                          \
	X(UPSTREAM_ERROR, "upstream_error")                                    \
	X(UPSTREAM_RESET, "upstream_reset")                                    \
	X(WRITE_STALLED, "write_stalled")                                      \
	X(UNREGISTERED, "unregistered")                                        \
	X(GATEWAY_SHUTDOWN, "gateway_shutdown")                                \
	X(GATEWAY_RESTART, "gateway_restart")                                  \
	X(PROXY_RESTARTED, "proxy_restarted")                                  \
	/* the audit writer's stand-in for a row that carried none */          \
	X(UNKNOWN, "unknown")                                                  \
	/* HTTP/1.1 in a terminated tunnel (gateway/parse/http_parse.c) */     \
	X(HTTP_BAD_TARGET, "http_bad_target")                                  \
	X(HTTP_BAD_HOST, "http_bad_host")                                      \
	X(HTTP_AMBIGUOUS_LENGTH, "http_ambiguous_length")                      \
	X(HTTP_BAD_LENGTH, "http_bad_length")                                  \
	X(HTTP_BAD_TRANSFER_ENCODING, "http_bad_transfer_encoding")            \
	X(HTTP_BAD_UPGRADE, "http_bad_upgrade")                                \
	X(HTTP_BAD_CHUNK, "http_bad_chunk")                                    \
	X(UPSTREAM_BAD_RESPONSE, "upstream_bad_response")                      \
	/* a connection closed to admit an instance below its fair share */    \
	X(OVER_SHARE, "over_share")                                            \
	/* credentials in a terminated tunnel (gateway/proxy/term.c) */        \
	X(CREDENTIAL_MISUSE, "credential_misuse")                              \
	X(REQUEST_NOT_ALLOWED, "request_not_allowed")                          \
	X(REQUEST_PATH_AMBIGUOUS, "request_path_ambiguous")                    \
	X(MISDIRECTED_REQUEST, "misdirected_request")                          \
	X(CREDENTIAL_REFLECTED, "credential_reflected")                        \
	/* an agent's refresh of a gateway-owned login, answered locally */    \
	X(LOGIN_ANSWERED, "login_answered")                                    \
	/* a reload bound the tunnel's host anew (proxy_policy_changed) */     \
	X(CREDENTIAL_REBOUND, "credential_rebound")                            \
	X(WEBSOCKET_VIOLATION, "websocket_violation")                          \
	X(TLS_ALPN_REFUSED, "tls_alpn_refused")                                \
	X(GUEST_TLS_FAILED, "guest_tls_failed")                                \
	X(UPSTREAM_CERT_INVALID, "upstream_cert_invalid")                      \
	X(UPSTREAM_CERT_NAME, "upstream_cert_name")                            \
	X(UPSTREAM_TLS_FAILED, "upstream_tls_failed")                          \
	/* the instance's audit budget (gateway/budget.c) is spent */          \
	X(AUDIT_BUDGET, "audit_budget")                                        \
	/* a held CONNECT the operator refused (ksbctl deny) */                \
	X(OPERATOR_DENIED, "operator_denied")                                  \
	/* a request's chunked body with trailer fields (term.c) */            \
	X(HTTP_TRAILER_REFUSED, "http_trailer_refused")                        \
	/* an h2 guest past a flood bound (gateway/proxy/h2.c) */              \
	X(H2_FLOOD, "h2_flood")                                                \
	X(H2_PROTOCOL_ERROR, "h2_protocol_error")

#define REASON_ENUM_(sym, name) REASON_##sym,
enum reason {
	REASON_NONE = 0, /* no reason: allowed so far / forget the row */
	REASON_TABLE(REASON_ENUM_) REASON_COUNT_
};
#undef REASON_ENUM_

/*
 * reason_name: the static name of r ("sni_mismatch"...); "" for
 * REASON_NONE and for a value outside the enum.  Never NULL.
 */
const char *reason_name(enum reason r);

/*
 * reason_lookup: the reason named name (NUL-terminated, exact, case
 * sensitive); REASON_NONE for NULL, "" or a name not in the table.
 */
enum reason reason_lookup(const char *name);

#endif

package objstore

import (
	"net/url"
	"strings"
)

// Redacted stands for a secret in a store's URL wherever the URL is shown.
const Redacted = "REDACTED"

// secretParams are the query parameters that carry credentials in a store's URL: a presigned
// S3 URL's (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token), Google's and Azure's
// (X-Goog-Signature, X-Goog-Credential, sig), and the usual names of a token or key. Matched
// case-insensitively, as a whole name or as its last word (access_token, api_key).
var secretParams = []string{"signature", "credential", "security-token", "token", "sig", "key", "secret",
	"password", "passwd", "auth", "authorization", "code"}

// Redact is URL s as it may be shown in a message, a log line or a plan: its userinfo (user
// and password) and the values of its credential query parameters replaced by Redacted; the
// scheme, host, path and other parameters kept, so that the message still names the store.
// Anything that is not a URL with a host is returned as it is (a local path).
func Redact(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return redactUnparsed(s)
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	if u.RawQuery != "" {
		u.RawQuery = redactQuery(u.RawQuery)
	}
	return u.String()
}

// redactQuery replaces the values of credential parameters of a raw query, keeping the rest
// of it byte for byte.
func redactQuery(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if hasValue && isSecretParam(name) {
			parts[i] = name + "=" + Redacted
		}
	}
	return strings.Join(parts, "&")
}

func isSecretParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range secretParams {
		if n == s || strings.HasSuffix(n, "-"+s) || strings.HasSuffix(n, "_"+s) {
			return true
		}
	}
	return false
}

// redactUnparsed redacts what can be told of a string that does not parse as a URL: the
// userinfo before the host, and the whole query.
func redactUnparsed(s string) string {
	scheme, rest, _ := strings.Cut(s, "://")
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = Redacted + rest[at:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q+1] + Redacted
	}
	return scheme + "://" + rest
}

// RedactText is s with every URL in it redacted (Redact): for error texts that quote a URL,
// such as net/http's (which drops a password but keeps the query).
func RedactText(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i
		for start > 0 && isSchemeByte(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !strings.ContainsRune(" \t\n\"'`<>()", rune(s[end])) {
			end++
		}
		b.WriteString(s[:start])
		b.WriteString(Redact(s[start:end]))
		s = s[end:]
	}
}

func isSchemeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// redactErr is err with every URL in its text redacted; errors.Is and As still see err.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{err}
}

type redactedError struct{ err error }

func (e *redactedError) Error() string { return RedactText(e.err.Error()) }
func (e *redactedError) Unwrap() error { return e.err }

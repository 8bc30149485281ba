// Package access guards readyspan's HTTP endpoints the way Kubernetes components guard theirs:
// TLS, and each request's bearer token checked by the apiserver (TokenReview) and the caller's
// right to GET the path asked of it (SubjectAccessReview on the non-resource URL), as
// kube-rbac-proxy does. It uses the authentication and authorization API clients directly
// rather than k8s.io/apiserver's delegating authenticator and authorizer: the same two calls,
// without the apiserver library's dependencies in the binary.
package access

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Config selects how the endpoints are served. The zero value is plain HTTP, open to whoever
// can reach the port (the default: a NetworkPolicy limits who can).
type Config struct {
	// Secure serves HTTPS and checks every request except Open paths with the apiserver.
	Secure bool
	// CertFile and KeyFile are the serving certificate; empty with Secure, a self-signed one is
	// made at start (as kube components do), and clients skip verification or pin it.
	CertFile, KeyFile string
	// Open paths need no token: the kubelet's probes carry none.
	Open []string
	// Verb is what a caller must be allowed to do on the path (the SubjectAccessReview's
	// non-resource verb): get when empty; create for an endpoint that takes data (the OTLP
	// input).
	Verb string
	// NextProtos are the protocols TLS offers (ALPN); none is HTTP/1.1 only.
	NextProtos []string
	// Path, when set, is the non-resource path every request is checked against whatever its
	// own: one endpoint served at several paths (OTLP/HTTP's /v1/traces and OTLP/gRPC's
	// method) is one thing to grant.
	Path string
	// Grants are further verbs on the path asked for each caller along with Verb and handed to
	// the handler in the request's Identity: what else the caller may do there, not whether it
	// may call at all.
	Grants []string
}

// Identity is who a checked request comes from, for a handler that decides more than whether
// it may call (IdentityFrom).
type Identity struct {
	User string
	// Node is the node a node-bound token names: a ServiceAccount token projected into a Pod
	// carries its node's name (TokenReview's authentication.kubernetes.io/node-name extra,
	// Kubernetes 1.30 and later), as a kubelet's credential does under NodeRestriction.
	Node string
	// Granted are the Config.Grants the caller has.
	Granted []string
}

// Has reports whether the caller was granted verb (one of Config.Grants).
func (id Identity) Has(verb string) bool {
	for _, g := range id.Granted {
		if g == verb {
			return true
		}
	}
	return false
}

// NodeNameExtra is the TokenReview extra that names the node a bound ServiceAccount token's
// Pod runs on.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

type identityKey struct{}

// IdentityFrom is the identity Guard.Handler checked for the request (false where the guard
// is not Secure: nobody was asked).
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Guard wraps a handler and listens according to a Config.
type Guard struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]decision // by hash of token and path
}

type decision struct {
	code    int // 0: allowed; else 401 or 403
	id      Identity
	expires time.Time
}

// Decisions are cached briefly so a scrape every few seconds costs the apiserver two calls a
// minute, and the cache is bounded so a flood of bad tokens cannot grow it.
const (
	cacheTTL  = time.Minute
	cacheSize = 1024
)

// New returns a Guard; client is used only when cfg.Secure.
func New(cfg Config, client kubernetes.Interface, log *slog.Logger) (*Guard, error) {
	if !cfg.Secure && (cfg.CertFile != "" || cfg.KeyFile != "") {
		return nil, errors.New("--metrics-tls-cert-file and --metrics-tls-key-file need --metrics-secure")
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("--metrics-tls-cert-file and --metrics-tls-key-file go together")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{cfg: cfg, client: client, log: log, now: time.Now, cache: map[[32]byte]decision{}}, nil
}

// Listen opens the listener: TLS when Secure.
func (g *Guard) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return g.Wrap(ln)
}

// Wrap serves TLS on ln when Secure; on an error it closes ln.
func (g *Guard) Wrap(ln net.Listener) (net.Listener, error) {
	if !g.cfg.Secure {
		return ln, nil
	}
	cert, err := g.certificate()
	if err != nil {
		ln.Close()
		return nil, err
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: g.cfg.NextProtos}), nil
}

func (g *Guard) certificate() (tls.Certificate, error) {
	if g.cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(g.cfg.CertFile, g.cfg.KeyFile)
		if err != nil {
			return cert, fmt.Errorf("load the TLS certificate %s: %w", g.cfg.CertFile, err)
		}
		return cert, nil
	}
	return selfSigned()
}

// selfSigned makes a one-year ECDSA certificate for this host's name.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate a key: %w", err)
	}
	host, _ := os.Hostname()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "readyspan"},
		DNSNames:     []string{host, "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-sign a certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func (g *Guard) verb() string {
	if g.cfg.Verb == "" {
		return "get"
	}
	return g.cfg.Verb
}

// Handler checks each request before next sees it, when Secure.
func (g *Guard) Handler(next http.Handler) http.Handler {
	if !g.cfg.Secure {
		return next
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		for _, p := range g.cfg.Open {
			if r.URL.Path == p {
				next.ServeHTTP(rw, r)
				return
			}
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(rw, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		path := r.URL.Path
		if g.cfg.Path != "" {
			path = g.cfg.Path
		}
		d := g.decide(r.Context(), strings.TrimSpace(token), path)
		switch d.code {
		case 0:
			next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), identityKey{}, d.id)))
		case http.StatusUnauthorized:
			http.Error(rw, "Unauthorized", http.StatusUnauthorized)
		case http.StatusForbidden:
			http.Error(rw, fmt.Sprintf("Forbidden: %s may not %s %s", d.id.User, g.verb(), path), http.StatusForbidden)
		default:
			http.Error(rw, "cannot check the request with the apiserver", d.code)
		}
	})
}

// decide asks the apiserver who the token is, whether they may use Verb on path and which of
// the Grants they have, or answers from the cache. An apiserver error is not cached: the next request asks again.
func (g *Guard) decide(ctx context.Context, token, path string) decision {
	key := sha256.Sum256([]byte(token + "\x00" + path))
	now := g.now()
	g.mu.Lock()
	if d, ok := g.cache[key]; ok && now.Before(d.expires) {
		g.mu.Unlock()
		return d
	}
	g.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := g.client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		g.log.Warn("TokenReview failed; answering 503", "err", err)
		return decision{code: http.StatusServiceUnavailable}
	}
	d := decision{expires: now.Add(cacheTTL)}
	if !tr.Status.Authenticated {
		d.code = http.StatusUnauthorized
	} else {
		u := tr.Status.User
		d.id.User = u.Username
		if nodes := u.Extra[NodeNameExtra]; len(nodes) == 1 {
			d.id.Node = nodes[0]
		}
		extra := map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
		allowed := func(verb string) (bool, error) {
			sar, err := g.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
				NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
			}}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			if !sar.Status.Allowed {
				g.log.Debug("Request denied", "user", u.Username, "path", path, "verb", verb, "reason", sar.Status.Reason)
			}
			return sar.Status.Allowed, nil
		}
		ok, err := allowed(g.verb())
		if err != nil {
			g.log.Warn("SubjectAccessReview failed; answering 503", "err", err)
			return decision{code: http.StatusServiceUnavailable}
		}
		if !ok {
			d.code = http.StatusForbidden
		}
		for _, verb := range g.cfg.Grants {
			if !ok {
				break
			}
			has, err := allowed(verb)
			if err != nil {
				g.log.Warn("SubjectAccessReview failed; answering 503", "err", err)
				return decision{code: http.StatusServiceUnavailable}
			}
			if has {
				d.id.Granted = append(d.id.Granted, verb)
			}
		}
	}
	g.mu.Lock()
	if len(g.cache) >= cacheSize {
		for k, v := range g.cache { // expired first; else any one: the cache only saves calls
			if !now.Before(v.expires) || len(g.cache) >= cacheSize {
				delete(g.cache, k)
			}
			if len(g.cache) < cacheSize {
				break
			}
		}
	}
	g.cache[key] = d
	g.mu.Unlock()
	return d
}

package apiclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// RequestTimeout bounds each request.
const RequestTimeout = 30 * time.Second

// maxToken bounds a token file's token: a service account token is about 1 KiB.
const maxToken = 16 << 10

// ErrNotHeld is a 404 for one trace (api/v1/pods/UID, api/v1/rollouts/ID): the daemon does not
// hold it, or no longer (it left the ring).
var ErrNotHeld = errors.New("not held by the daemon")

// Client reads one daemon's API.
type Client struct {
	// Base is the daemon's address (http://host:8080); Token, when set, is sent as a bearer token
	// (readyspan run with --metrics-secure checks it).
	Base  *url.URL
	Token string
	HTTP  *http.Client
}

// Config is what the command line says of the daemon: --url, --token-file, --ca-file.
type Config struct {
	URL, TokenFile, CAFile string
}

// New checks cfg and reads its files.
func New(cfg Config) (*Client, error) {
	base, err := CheckBase(cfg.URL)
	if err != nil {
		return nil, err
	}
	c := &Client{Base: base, HTTP: &http.Client{Timeout: RequestTimeout}}
	if cfg.TokenFile != "" {
		b, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if c.Token = strings.TrimSpace(string(b)); c.Token == "" || len(c.Token) > maxToken {
			return nil, fmt.Errorf("--token-file %s holds no token", cfg.TokenFile)
		}
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", cfg.CAFile)
		}
		c.HTTP.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return c, nil
}

// CheckBase checks a --url: http or https, a host, no query, no credentials (they would be
// printed in every error; a token goes in --token-file).
func CheckBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("--url %q: want http:// or https:// and a host, without a query or credentials", raw)
	}
	return u, nil
}

// CheckID checks a UID or trace ID before it goes into a path: what the daemon listed is
// hostile too.
func CheckID(id string) error {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/?#%\\") {
		return fmt.Errorf("the daemon listed an ID %q", Cut(id))
	}
	return nil
}

// Get reads one answer of the API at path (relative to Base: "api/v1/pods") into v, at most
// limit bytes. A 404 on one trace's path is ErrNotHeld.
func (c *Client) Get(ctx context.Context, path string, q url.Values, limit int64, v any) error {
	u := c.Base.JoinPath(path)
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the method and the URL
		}
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound && strings.Count(path, "/") >= 3:
		return ErrNotHeld
	case resp.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", u.Redacted(), resp.Status, strings.TrimSpace(string(msg)))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("GET %s: the answer is larger than %d bytes", u.Redacted(), limit)
	}
	if err := DecodeNumbers(body, v); err != nil {
		return fmt.Errorf("GET %s: not the API's JSON: %w", u.Redacted(), err)
	}
	return nil
}

// DecodeNumbers decodes strictly enough to refuse a value of the wrong shape, keeping numbers
// as json.Number for the attributes.
func DecodeNumbers(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// Cut bounds a hostile string quoted in an error.
func Cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

package objstore

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// How an s3:// or gs:// store finds its endpoint, region and credentials: the environment as
// the AWS tools (and, for gs://, GDAL's GS_* variables) read it. The variables are read when a
// store is opened.

// service is what an object-store scheme reads from the environment.
type service struct {
	scheme       string   // "s3" or "gs"
	endpointVars []string // the first that is set overrides defaultHost
	defaultHost  string
	keyVar       string // access key id; the secret and token variables follow from it
	secretVar    string
	tokenVar     string
	noSignVar    string
	profiles     bool // ~/.aws/credentials profiles apply
}

var services = map[string]service{
	"s3": {scheme: "s3", endpointVars: []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}, defaultHost: "s3.amazonaws.com",
		keyVar: "AWS_ACCESS_KEY_ID", secretVar: "AWS_SECRET_ACCESS_KEY", tokenVar: "AWS_SESSION_TOKEN",
		noSignVar: "AWS_NO_SIGN_REQUEST", profiles: true},
	"gs": {scheme: "gs", endpointVars: []string{"GS_ENDPOINT_URL"}, defaultHost: "storage.googleapis.com",
		keyVar: "GS_ACCESS_KEY_ID", secretVar: "GS_SECRET_ACCESS_KEY", noSignVar: "GS_NO_SIGN_REQUEST"},
}

// endpoint is where requests go: a host[:port], whether TLS, and whether it is a custom
// endpoint (path-style addressing, the usual region default).
type endpoint struct {
	host   string
	secure bool
	custom bool
	from   string // the variable it came from, for messages
}

func (e endpoint) String() string {
	scheme := "https"
	if !e.secure {
		scheme = "http"
	}
	if e.from != "" {
		return fmt.Sprintf("%s://%s (%s)", scheme, e.host, e.from)
	}
	return scheme + "://" + e.host
}

func (sv service) endpoint() (endpoint, error) {
	for _, v := range sv.endpointVars {
		raw := os.Getenv(v)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return endpoint{}, fmt.Errorf("%s=%q: expected an http:// or https:// URL such as http://127.0.0.1:9000", v, raw)
		}
		return endpoint{host: u.Host, secure: u.Scheme == "https", custom: true, from: v}, nil
	}
	return endpoint{host: sv.defaultHost, secure: true}, nil
}

// region is AWS_REGION, else AWS_DEFAULT_REGION; "" lets the client look the bucket's up,
// except at a custom endpoint, where servers expect us-east-1 unless told otherwise.
func (sv service) region(ep endpoint) string {
	if sv.scheme == "s3" {
		for _, v := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
			if r := os.Getenv(v); r != "" {
				return r
			}
		}
	}
	if ep.custom || sv.scheme == "gs" {
		return "us-east-1"
	}
	return ""
}

// credentials returns the credentials to sign with and where they came from (for messages):
// the environment's keys, else a profile of the shared credentials file, else none
// (anonymous requests, as public buckets take).
func (sv service) credentials() (*credentials.Credentials, string) {
	anonymous := credentials.NewStaticV4("", "", "")
	if yes(os.Getenv(sv.noSignVar)) {
		return anonymous, "none (" + sv.noSignVar + ")"
	}
	if id := os.Getenv(sv.keyVar); id != "" {
		return credentials.NewStaticV4(id, os.Getenv(sv.secretVar), os.Getenv(sv.tokenVar)),
			fmt.Sprintf("%s %s from the environment", sv.keyVar, id)
	}
	if sv.profiles {
		profile := os.Getenv("AWS_PROFILE")
		if profile == "" {
			profile = "default"
		}
		c := credentials.NewFileAWSCredentials("", profile)
		if v, err := c.Get(); err == nil && v.AccessKeyID != "" {
			return c, fmt.Sprintf("profile %q of the AWS credentials files (key %s)", profile, v.AccessKeyID)
		}
	}
	return anonymous, "none found (anonymous requests; set " + sv.keyVar + " and " + sv.secretVar + ")"
}

func yes(s string) bool {
	switch strings.ToLower(s) {
	case "1", "yes", "true", "on":
		return true
	}
	return false
}

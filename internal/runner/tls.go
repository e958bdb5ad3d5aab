package runner

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// CABundleFile is the name, in a runner's data directory, of the bundle
// of certificate authorities its git trusts (WriteCABundle).
const CABundleFile = "ca-bundle.pem"

// systemBundles are where systems keep their certificate authorities as
// one PEM file, in the order crypto/x509 looks for them on Linux (the
// last one is also macOS's and the BSDs'); $SSL_CERT_FILE comes first.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine, macOS, the BSDs
}

// WriteCABundle writes dir/CABundleFile (mode 0600): the PEM certificates
// of ca followed by the system's authorities, when a file of them is
// found, and returns its path. git takes one file of authorities in
// place of its own (http.sslCAInfo) where the runner's own requests add
// ca to the system's: with both in the file, git trusts what the runner
// trusts. It is written again at each start.
func WriteCABundle(dir string, ca []byte) (string, error) {
	var b bytes.Buffer
	b.Write(bytes.TrimSpace(ca))
	b.WriteByte('\n')
	if sys := systemBundle(); len(sys) > 0 {
		b.Write(sys)
	}
	path := filepath.Join(dir, CABundleFile)
	tmp, err := os.CreateTemp(dir, ".ca-bundle-*")
	if err != nil {
		return "", fmt.Errorf("write the certificate authorities for git: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	_, err = tmp.Write(b.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("write the certificate authorities for git: %w", err)
	}
	return path, nil
}

// systemBundle returns the system's certificate authorities as PEM: the
// file $SSL_CERT_FILE names, else the first of systemBundles that can be
// read; nil when there is none.
func systemBundle() []byte {
	files := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = append([]string{f}, files...)
	}
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && len(bytes.TrimSpace(data)) > 0 {
			return data
		}
	}
	return nil
}

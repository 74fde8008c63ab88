// Stand-ins for BIND's dig and glibc's getent, which the Kubernetes DNS conformance specs run
// in their probe pods (the agnhost and glibc-dns-testing images, both Linux distributions
// that cannot be built here). Built by build-e2e.sh; images.sh packs them into those images.
module vnest.dev/testbed/dnstools

go 1.26.0

require github.com/miekg/dns v1.1.64

require (
	golang.org/x/mod v0.23.0 // indirect
	golang.org/x/net v0.35.0 // indirect
	golang.org/x/sync v0.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	golang.org/x/tools v0.30.0 // indirect
)

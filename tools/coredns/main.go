// CoreDNS with only the plugins the real node's cluster DNS uses (see scripts/real-node.sh).
// Building the full CoreDNS pulls every cloud provider's SDK; this keeps the first build short.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order plugins run in, as CoreDNS's own plugin.cfg orders them.
var directives = []string{"bind", "health", "ready", "log", "errors", "cache", "kubernetes"}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}

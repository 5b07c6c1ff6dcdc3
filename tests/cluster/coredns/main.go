// CoreDNS with only the plugins tests/cluster/Corefile.in uses: the full build carries every cloud
// provider's SDK and took longer to compile than all of helm.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	// The order each request passes through the plugins of a server block, as CoreDNS's plugin.cfg
	// orders these five.
	dnsserver.Directives = []string{"bind", "errors", "cache", "template", "kubernetes"}
}

func main() { coremain.Run() }

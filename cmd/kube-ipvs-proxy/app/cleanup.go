package app

import (
	"fmt"
	"io"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// runCleanup removes what the proxy programmed: our IPVS virtual servers
// on the dummy interface's addresses and the NodePort ones our nftables
// table records, the dummy interface, and the table. Foreign virtual
// servers and tables are left alone.
func runCleanup(o *Options, stderr io.Writer) int {
	dp, err := proxier.NewDataPlane(o.RunConfig().DataPlane)
	if err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %v\n", err)
		return ExitError
	}
	defer dp.Close()
	if err := dp.Cleanup(); err != nil {
		fmt.Fprintf(stderr, "kube-ipvs-proxy: cleanup: %v\n", err)
		return ExitError
	}
	return ExitOK
}

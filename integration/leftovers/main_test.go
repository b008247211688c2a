//go:build integration

package leftovers

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labmain"
)

func TestMain(m *testing.M) { labmain.Run(m) }

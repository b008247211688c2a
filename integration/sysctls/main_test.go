//go:build integration

package sysctls

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labmain"
)

func TestMain(m *testing.M) { labmain.Run(m) }

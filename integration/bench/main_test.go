//go:build integration

package bench

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labmain"
)

func TestMain(m *testing.M) { labmain.Run(m) }

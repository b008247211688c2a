package demo

// The plan the VM half compares with: examples/plans/node-a.json.
const (
	envPlan = "KIP_DEMO_PLAN"
	vmPlan  = "/demo/node-a.json"
)

// Package v20170312 stands in for the Tencent Cloud VPC SDK package of the
// same path, which the Go module proxy here does not serve. flanneld's main
// registers every backend, tencent-vpc included, so its build needs this
// package to exist; the lab runs the vxlan backend only. Every call fails
// with ErrNotBuilt, so a net-conf.json asking for tencent-vpc gets a clear
// error from flanneld instead of a silent no-op.
package v20170312

import "errors"

// ErrNotBuilt is what every API call returns.
var ErrNotBuilt = errors.New("tencent-vpc backend: the lab's flanneld is built without the Tencent Cloud SDK")

// Client is the API client; it has no connection.
type Client struct{}

// NewClientWithSecretId returns a client whose calls all fail.
func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return &Client{}, nil
}

// Filter narrows DescribeRouteTables.
type Filter struct {
	Name   *string
	Values []*string
}

// Route is one route of a route table.
type Route struct {
	RouteId              *uint64
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteType            *string
	Enabled              *bool
}

// RouteTable is a VPC route table.
type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

// DescribeRouteTablesRequest asks for the route tables matching Filters.
type DescribeRouteTablesRequest struct{ Filters []*Filter }

// DescribeRouteTablesResponse holds the matching tables.
type DescribeRouteTablesResponse struct {
	Response *struct{ RouteTableSet []*RouteTable }
}

// CreateRoutesRequest adds Routes to a table.
type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// CreateRoutesResponse is empty here.
type CreateRoutesResponse struct{}

// DeleteRoutesRequest removes Routes from a table.
type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// DeleteRoutesResponse is empty here.
type DeleteRoutesResponse struct{}

// NewDescribeRouteTablesRequest returns an empty request.
func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}

// NewCreateRoutesRequest returns an empty request.
func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }

// NewDeleteRoutesRequest returns an empty request.
func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }

// DescribeRouteTables fails with ErrNotBuilt.
func (c *Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, ErrNotBuilt
}

// CreateRoutes fails with ErrNotBuilt.
func (c *Client) CreateRoutes(*CreateRoutesRequest) (*CreateRoutesResponse, error) {
	return nil, ErrNotBuilt
}

// DeleteRoutes fails with ErrNotBuilt.
func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (*DeleteRoutesResponse, error) {
	return nil, ErrNotBuilt
}

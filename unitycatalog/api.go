package unitycatalog

import (
	"context"
	"net/http"
	"net/url"
)

// CatalogInfo, SchemaInfo, TableInfo, ColumnInfo and CreateTable are the
// API's objects (only the fields DeltaBus uses; all.yaml has the rest).
type CatalogInfo struct {
	Name       string            `json:"name"`
	Comment    string            `json:"comment,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

type SchemaInfo struct {
	Name        string            `json:"name"`
	CatalogName string            `json:"catalog_name"`
	Comment     string            `json:"comment,omitempty"`
	Properties  map[string]string `json:"properties,omitempty"`
	FullName    string            `json:"full_name,omitempty"`
}

type ColumnInfo struct {
	Name     string `json:"name"`
	TypeText string `json:"type_text"`
	TypeJSON string `json:"type_json"`
	TypeName string `json:"type_name"`
	Position int    `json:"position"`
	Nullable bool   `json:"nullable"`
	Comment  string `json:"comment,omitempty"`
}

type CreateTable struct {
	Name             string            `json:"name"`
	CatalogName      string            `json:"catalog_name"`
	SchemaName       string            `json:"schema_name"`
	TableType        string            `json:"table_type"`
	DataSourceFormat string            `json:"data_source_format"`
	Columns          []ColumnInfo      `json:"columns"`
	StorageLocation  string            `json:"storage_location"`
	Comment          string            `json:"comment,omitempty"`
	Properties       map[string]string `json:"properties,omitempty"`
}

type TableInfo struct {
	CreateTable
	TableID   string `json:"table_id,omitempty"`
	Owner     string `json:"owner,omitempty"`
	CreatedAt int64  `json:"created_at,omitempty"`
	UpdatedAt int64  `json:"updated_at,omitempty"`
}

// FullName is catalog.schema.table.
func (t CreateTable) FullName() string { return t.CatalogName + "." + t.SchemaName + "." + t.Name }

// GetCatalog returns the catalog (an error IsNotFound when absent).
func (c *Client) GetCatalog(ctx context.Context, name string) (CatalogInfo, error) {
	var out CatalogInfo
	err := c.do(ctx, http.MethodGet, "/catalogs/"+name, nil, nil, &out)
	return out, err
}

// CreateCatalog creates a catalog.
func (c *Client) CreateCatalog(ctx context.Context, in CatalogInfo) (CatalogInfo, error) {
	var out CatalogInfo
	err := c.do(ctx, http.MethodPost, "/catalogs", nil, in, &out)
	return out, err
}

// GetSchema returns catalog.schema (an error IsNotFound when absent).
func (c *Client) GetSchema(ctx context.Context, catalog, schema string) (SchemaInfo, error) {
	var out SchemaInfo
	err := c.do(ctx, http.MethodGet, "/schemas/"+catalog+"."+schema, nil, nil, &out)
	return out, err
}

// CreateSchema creates a schema in its catalog.
func (c *Client) CreateSchema(ctx context.Context, in SchemaInfo) (SchemaInfo, error) {
	var out SchemaInfo
	in.FullName = ""
	err := c.do(ctx, http.MethodPost, "/schemas", nil, in, &out)
	return out, err
}

// ListTables returns every table of catalog.schema, following pages.
func (c *Client) ListTables(ctx context.Context, catalog, schema string) ([]TableInfo, error) {
	var all []TableInfo
	q := url.Values{"catalog_name": {catalog}, "schema_name": {schema}, "max_results": {"50"}}
	for range 10000 {
		var page struct {
			Tables        []TableInfo `json:"tables"`
			NextPageToken string      `json:"next_page_token"`
		}
		if err := c.do(ctx, http.MethodGet, "/tables", q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Tables...)
		if page.NextPageToken == "" {
			return all, nil
		}
		q.Set("page_token", page.NextPageToken)
	}
	return all, nil
}

// GetTable returns catalog.schema.table (an error IsNotFound when absent).
func (c *Client) GetTable(ctx context.Context, fullName string) (TableInfo, error) {
	var out TableInfo
	err := c.do(ctx, http.MethodGet, "/tables/"+fullName, nil, nil, &out)
	return out, err
}

// CreateTable creates an external table.
func (c *Client) CreateTable(ctx context.Context, in CreateTable) (TableInfo, error) {
	var out TableInfo
	err := c.do(ctx, http.MethodPost, "/tables", nil, in, &out)
	return out, err
}

// DeleteTable deletes a table's catalog entry (an EXTERNAL table's data
// stays).
func (c *Client) DeleteTable(ctx context.Context, fullName string) error {
	return c.do(ctx, http.MethodDelete, "/tables/"+fullName, nil, nil, nil)
}

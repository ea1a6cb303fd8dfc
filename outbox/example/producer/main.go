// Command producer shows the transactional outbox from a service's side:
// the business row and the event that announces it are written in one
// transaction, so the event exists if and only if the order does.
//
//	producer -dsn postgres://app@localhost:5432/shop -customer c-42 -total 1250
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/jackc/pgx/v5"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	customer := flag.String("customer", "c-42", "customer id")
	total := flag.Int64("total", 1250, "order total in cents")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *dsn, *customer, *total); err != nil {
		slog.Error("producer failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, customer string, totalCents int64) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if err := setup(ctx, conn); err != nil {
		return err
	}
	orderID, eventID, err := placeOrder(ctx, conn, customer, totalCents)
	if err != nil {
		return err
	}
	fmt.Printf("order %d placed, event %s written to the outbox\n", orderID, eventID)
	return nil
}

// setup creates the outbox (as "relay migrate" would) and the example's
// orders table.
func setup(ctx context.Context, conn *pgx.Conn) error {
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		customer text NOT NULL,
		total_cents bigint NOT NULL CHECK (total_cents > 0))`)
	if err != nil {
		return fmt.Errorf("create orders table: %w", err)
	}
	return nil
}

// orderPlaced is the payload of an OrderPlaced event, schema version 1.
type orderPlaced struct {
	OrderID    int64  `json:"order_id"`
	Customer   string `json:"customer"`
	TotalCents int64  `json:"total_cents"`
}

// placeOrder inserts an order and its OrderPlaced event atomically.
func placeOrder(ctx context.Context, conn *pgx.Conn, customer string, totalCents int64) (orderID int64, eventID string, err error) {
	eventID = outbox.NewID()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO orders (customer, total_cents) VALUES ($1, $2) RETURNING id`,
			customer, totalCents).Scan(&orderID)
		if err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		return outbox.Write(ctx, tx, outbox.NewEvent{
			ID:      eventID,
			Topic:   "orders",
			Key:     strconv.FormatInt(orderID, 10),
			Type:    "OrderPlaced",
			Payload: orderPlaced{OrderID: orderID, Customer: customer, TotalCents: totalCents},
			Headers: map[string]string{"source": "example-producer"},
		})
	})
	if err != nil {
		return 0, "", fmt.Errorf("place order: %w", err)
	}
	return orderID, eventID, nil
}

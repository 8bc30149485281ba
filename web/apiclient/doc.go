// Package apiclient reads a running readyspan's UI JSON API (docs/ui.md) for the commands that
// judge or compare the daemon's traces from outside the cluster (`compare --url`, `gate --url`):
// the daemon's address checked, its bearer token and CA read from files, every answer bounded in
// size and time and decoded strictly. It only reads; it knows the API's paths, not its shapes.
package apiclient

module example.com/renew-margin


module local.invalid/airflowt9k/pause

go 1.26.0

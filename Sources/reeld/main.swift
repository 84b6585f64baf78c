print("reeld")

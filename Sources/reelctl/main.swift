print("reelctl")

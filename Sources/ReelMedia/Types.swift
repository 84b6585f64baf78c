/// Non-owning view of an I420 (yuv420p) picture.
public struct I420Frame {
    public var y, u, v: UnsafePointer<UInt8>
    public var strideY, strideU, strideV: Int
    public var width, height: Int
    public init(y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>,
                strideY: Int, strideU: Int, strideV: Int, width: Int, height: Int) {
        self.y = y; self.u = u; self.v = v
        self.strideY = strideY; self.strideU = strideU; self.strideV = strideV
        self.width = width; self.height = height
    }
}

/// An encoded packet, valid only inside the callback that receives it. Times are in the encoder's `timeBase`.
public struct Packet {
    public let data: UnsafeRawBufferPointer
    public let pts: Int64
    public let dts: Int64
    public let duration: Int64
    public let isKeyframe: Bool
    public init(data: UnsafeRawBufferPointer, pts: Int64, dts: Int64, duration: Int64, isKeyframe: Bool) {
        self.data = data; self.pts = pts; self.dts = dts; self.duration = duration; self.isKeyframe = isKeyframe
    }
}

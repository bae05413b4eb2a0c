import Vigil

/// hello-http's configuration: one key.
///
/// ```
/// { "greeting": "Hello from hello-http!" }
/// ```
///
/// | key | allowed |
/// | --- | --- |
/// | `greeting` | 1 … 256 bytes of UTF-8, no control characters (it is an HTTP body line) |
///
/// A file that leaves `greeting` out gets the default; a key other than `greeting` is an error
/// (Vigil's loader rejects keys the type never asks for).
struct HelloConfiguration: ValidatedConfiguration {
    /// What `GET /` answers.
    var greeting = "Hello from hello-http!"

    /// The longest greeting, in bytes of UTF-8.
    static let maximumGreetingBytes = 256

    static let defaultConfiguration = HelloConfiguration()

    init() {}

    enum CodingKeys: String, CodingKey { case greeting }

    init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: CodingKeys.self)
        greeting = try keys.decode(String.self, forKey: .greeting, default: Self.defaultConfiguration.greeting)
    }

    func validate() throws(InvalidValue) {
        let bytes = greeting.utf8.count
        guard (1...Self.maximumGreetingBytes).contains(bytes) else {
            throw InvalidValue(
                ["greeting"],
                "must be 1 to \(Self.maximumGreetingBytes) bytes of UTF-8 (found \(bytes) bytes: "
                    + "\(DisplayText.quoted(greeting)))"
            )
        }
        guard !greeting.unicodeScalars.contains(where: DisplayText.isControl) else {
            throw InvalidValue(
                ["greeting"],
                "must not contain control characters such as line breaks, tabs or escapes "
                    + "(found \(DisplayText.quoted(greeting)))"
            )
        }
    }
}
